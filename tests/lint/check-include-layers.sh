#!/bin/sh
# SPDX-License-Identifier: MIT
# The layers of src/ (docs/ARCHITECTURE.md, "Layers"): a folder includes its
# own headers and those of the folders in the layers below it, nothing that
# is beside it or above it. The layers are read from that section, one
# numbered line each, "N. `folder`, `folder`: what they are". Exit 1
# naming every include that goes up or sideways, every source the list does
# not place, and any cycle between folders.
set -eu
cd "${1:-$(dirname "$0")/../..}"

doc=docs/ARCHITECTURE.md
# "folder layer" lines: the backquoted names before the line's first ':'.
layers=$(awk '
        /^## / { on = ($0 ~ /^## Layers/); next }
        on && /^[0-9]+\. / {
                n = $1 + 0
                line = $0
                sub(/:.*/, "", line)
                while (match(line, /`[^`]+`/)) {
                        print substr(line, RSTART + 1, RLENGTH - 2), n
                        line = substr(line, RSTART + RLENGTH)
                }
        }' "$doc")
if [ -z "$layers" ]; then
        echo "include-layers: no numbered list under \"## Layers\" in $doc" >&2
        exit 1
fi

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

# Every source of src/ ("file -") and every include of a folder of src/
# ("file folder"), checked against the layers; the folder-to-folder edges
# go to $edges for the cycle check.
folders=$(find src -mindepth 1 -maxdepth 1 -type d -printf '%f ')
status=0
{
        find src -name '*.[ch]' | sed 's/$/ -/'
        grep -rHE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^/"]+/' --include='*.[ch]' src |
                sed 's|^\([^:]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^/"]*\)/.*|\1 \2|'
} | sort -u | awk -v doc="$doc" -v layers="$layers" -v folders="$folders" -v edges="$edges" '
        BEGIN {
                n = split(layers, l, "\n")
                for (i = 1; i <= n; i++) {
                        split(l[i], f, " ")
                        layer[f[1]] = f[2]
                }
                n = split(folders, f, " ")
                for (i = 1; i <= n; i++)
                        folder[f[i]] = 1
        }
        # The folder of a source: src/X/... is X; a file directly in src/ is itself.
        function module_of(p) {
                sub(/^src\//, "", p)
                sub(/\/.*/, "", p)
                return p
        }
        $2 == "-" {
                m = module_of($1)
                if (!(m in layer)) {
                        printf "include-layers: %s is in %s, which %s does not place in a layer\n", $1, m, doc > "/dev/stderr"
                        bad = 1
                }
                next
        }
        {
                m = module_of($1)
                d = $2
                if (d == m || !(m in layer) || !(d in folder))
                        next
                print m, d > edges
                if (!(d in layer)) {
                        printf "include-layers: %s includes %s/, which %s does not place in a layer\n", $1, d, doc > "/dev/stderr"
                        bad = 1
                } else if (layer[d] >= layer[m]) {
                        printf "include-layers: %s (%s, layer %d) includes %s/ (layer %d), %s\n", $1, m, layer[m], d, layer[d], layer[d] == layer[m] ? "beside it" : "above it" > "/dev/stderr"
                        bad = 1
                }
        }
        END { exit bad }' || status=1

# A cycle between folders (which the layers already exclude, named
# separately so that it cannot hide behind an edit of the list).
if [ -s "$edges" ] && ! sort -u "$edges" | tsort >/dev/null 2>&1; then
        echo "include-layers: the folders of src/ include each other in a cycle:" >&2
        sort -u "$edges" | tsort 2>&1 >/dev/null | sed 's/^/include-layers:   /' >&2
        status=1
fi

[ "$status" -eq 0 ] && echo "include-layers: every include of src/ goes down the layers of $doc, no cycle"
exit "$status"
