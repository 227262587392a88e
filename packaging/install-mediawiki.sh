#!/bin/sh
# Test-only: put Debian 12's MediaWiki 1.39 code (the packages mediawiki and
# mediawiki-classes, from the configured Debian mirror) into a directory for
# the tests' real wiki (tests/fixtures/mediawiki.py), without installing the
# packages: no Apache, no /etc/mediawiki, no database is set up here. The
# PHP runtime comes from the php-* "test" packages of debian-packages.txt.
#
# Usage: packaging/install-mediawiki.sh [DIR]
# DIR defaults to /usr/local/lib/wikiweb-test/mediawiki; the fixture looks
# there, or at $WIKIWEB_MEDIAWIKI_DIR. Idempotent: a DIR that holds the same
# version is left alone. Called by packaging/install-deps.sh (all).
set -eu

dest=${1:-/usr/local/lib/wikiweb-test/mediawiki}
version=$(apt-cache policy mediawiki | awk '$1 == "Candidate:" { print $2 }')
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
        apt-get update -qq
        version=$(apt-cache policy mediawiki | awk '$1 == "Candidate:" { print $2 }')
fi
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
        echo "install-mediawiki: apt knows no mediawiki package (run apt-get update)" >&2
        exit 1
fi
if [ -f "$dest/.wikiweb-version" ] && [ "$(cat "$dest/.wikiweb-version")" = "$version" ]; then
        echo "install-mediawiki: MediaWiki $version is in $dest"
        exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chown _apt "$tmp" 2>/dev/null || true # apt-get download drops privileges to _apt
(cd "$tmp" && apt-get download -qq "mediawiki=$version" "mediawiki-classes=$version")
mkdir "$tmp/root"
for deb in "$tmp"/*.deb; do
        dpkg-deb -x "$deb" "$tmp/root"
done

# The package's tree points at /var/lib/mediawiki and /etc/mediawiki through
# absolute symlinks; the tests keep each wiki's settings, database and
# uploads in its own directory (MW_CONFIG_FILE), so drop those links.
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
echo "install-mediawiki: MediaWiki $version extracted to $dest"
