# SPDX-License-Identifier: MIT
# Sourced by the bench scripts: find the wikiwebd to measure and check the
# tools a script needs.
#   bench_find_wikiwebd [PATH]   sets $root and $wikiwebd, exits 2 if none
#   bench_need TOOL... -- HINT   exits 2 naming the first missing tool

bench_find_wikiwebd() {
        root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
        wikiwebd=${1:-}
        if [[ -z $wikiwebd ]]; then
                for b in build-e2e build build-main; do
                        if [[ -x $root/$b/wikiwebd ]]; then wikiwebd=$root/$b/wikiwebd; break; fi
                done
        fi
        [[ -n $wikiwebd && -x $wikiwebd ]] || { echo "wikiwebd not found; pass its path" >&2; exit 2; }
}

bench_need() {
        local tools=() hint
        while [[ $# -gt 0 && $1 != -- ]]; do tools+=("$1"); shift; done
        hint=${2:-}
        for tool in "${tools[@]}"; do
                command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] ||
                        { echo "$tool is missing ($hint)" >&2; exit 2; }
        done
}
