#!/bin/sh
# Test-only: put MediaWiki's code into directories for the tests' real wiki
# (tests/fixtures/mediawiki.py), without installing any package: no Apache,
# no /etc/mediawiki, no database is set up here. The PHP runtime is Debian
# 12's, from the php-* "test" packages of debian-packages.txt.
#
#   1.39: Debian 12's packages mediawiki and mediawiki-classes, from the
#         machine's own apt sources.
#   1.43: the current LTS, Debian 13's packages of the same names, from the
#         same Debian archive (the mirrors the machine's apt uses for
#         bookworm and bookworm-security, asked for trixie, trixie-updates
#         and trixie-security) through a sources list, a lists directory and
#         a cache of its own under a temporary directory: the system's apt
#         configuration and state are not touched. It runs on Debian 12's
#         PHP 8.2 (1.43 needs 8.1 or later; its PHP libraries are bundled in
#         the package's vendor/).
#
# Usage: packaging/install-mediawiki.sh [1.39|1.43|all] [DIR]
# The default is all. DIR (only with one version) defaults to
# /usr/local/lib/wikiweb-test/mediawiki (1.39) and
# /usr/local/lib/wikiweb-test/mediawiki-1.43; the fixture looks there, or at
# $WIKIWEB_MEDIAWIKI_DIR. Idempotent: a DIR that holds the same version is
# left alone. Called by packaging/install-deps.sh (all).
set -eu

which=${1:-all}
base=/usr/local/lib/wikiweb-test

# extract VERSION DEST [APT-OPTION...]: the two packages at VERSION into DEST.
extract() {
        version=$1
        dest=$2
        shift 2
        if [ -f "$dest/.wikiweb-version" ] && [ "$(cat "$dest/.wikiweb-version")" = "$version" ]; then
                echo "install-mediawiki: MediaWiki $version is in $dest"
                return 0
        fi
        tmp=$(mktemp -d)
        chown _apt "$tmp" 2>/dev/null || true # apt-get download drops privileges to _apt
        (cd "$tmp" && apt-get "$@" download -qq "mediawiki=$version" "mediawiki-classes=$version")
        mkdir "$tmp/root"
        for deb in "$tmp"/*.deb; do
                dpkg-deb -x "$deb" "$tmp/root"
        done

        # The package's tree points at /var/lib/mediawiki and /etc/mediawiki
        # through absolute symlinks; the tests keep each wiki's settings,
        # database and uploads in its own directory (MW_CONFIG_FILE), so drop
        # those links.
        mw="$tmp/root/usr/share/mediawiki"
        rm -f "$mw/LocalSettings.php" "$mw/config" "$mw/images" "$mw/extensions"
        ln -s extensions-core "$mw/extensions"
        mkdir -p "$mw/images"
        echo "$version" > "$mw/.wikiweb-version"

        rm -rf "$dest.new"
        mkdir -p "$(dirname "$dest")"
        mv "$mw" "$dest.new"
        rm -rf "$dest"
        mv "$dest.new" "$dest"
        rm -rf "$tmp"
        echo "install-mediawiki: MediaWiki $version extracted to $dest"
}

candidate() {
        apt-cache "$@" policy mediawiki | awk '$1 == "Candidate:" { print $2 }'
}

install_139() {
        version=$(candidate)
        if [ -z "$version" ] || [ "$version" = "(none)" ]; then
                apt-get update -qq
                version=$(candidate)
        fi
        case "$version" in
        1:1.39.*) ;;
        *)
                echo "install-mediawiki: apt offers mediawiki ${version:-(none)}, not 1.39 (a Debian 12 machine?)" >&2
                exit 1
                ;;
        esac
        extract "$version" "$1"
}

install_143() {
        dest=$1
        # The machine's own Debian archive: the mirrors apt uses for bookworm.
        main=$(apt-cache policy | awk '$3 == "bookworm/main" { print $2; exit }')
        security=$(apt-cache policy | awk '$3 == "bookworm-security/main" { print $2; exit }')
        if [ -z "$main" ]; then
                apt-get update -qq
                main=$(apt-cache policy | awk '$3 == "bookworm/main" { print $2; exit }')
                security=$(apt-cache policy | awk '$3 == "bookworm-security/main" { print $2; exit }')
        fi
        if [ -z "$main" ]; then
                echo "install-mediawiki: apt has no Debian archive for bookworm/main configured" >&2
                exit 1
        fi
        keyring=/usr/share/keyrings/debian-archive-keyring.gpg
        aptdir=$(mktemp -d)
        chmod 755 "$aptdir" # apt drops privileges to _apt
        mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial"
        {
                echo "deb [signed-by=$keyring] $main trixie main"
                echo "deb [signed-by=$keyring] $main trixie-updates main"
                if [ -n "$security" ]; then
                        echo "deb [signed-by=$keyring] $security trixie-security main"
                fi
        } > "$aptdir/sources.list"
        chown -R _apt "$aptdir/lists" 2>/dev/null || true
        set -- -o "Dir::Etc::sourcelist=$aptdir/sources.list" -o Dir::Etc::sourceparts=/dev/null \
                -o Dir::Etc::preferencesparts=/dev/null -o "Dir::State::Lists=$aptdir/lists" \
                -o "Dir::Cache=$aptdir/cache" -o APT::Get::List-Cleanup=0
        apt-get "$@" update -qq
        version=$(candidate "$@")
        case "$version" in
        1:1.43.*) ;;
        *)
                rm -rf "$aptdir"
                echo "install-mediawiki: Debian 13 offers mediawiki ${version:-(none)}, not 1.43" >&2
                exit 1
                ;;
        esac
        extract "$version" "$dest" "$@"
        rm -rf "$aptdir"
}

case "$which" in
1.39) install_139 "${2:-$base/mediawiki}" ;;
1.43) install_143 "${2:-$base/mediawiki-1.43}" ;;
all)
        install_139 "$base/mediawiki"
        install_143 "$base/mediawiki-1.43"
        ;;
*)
        echo "usage: install-mediawiki.sh [1.39|1.43|all] [DIR]" >&2
        exit 2
        ;;
esac
