#!/usr/bin/env bash
# Installs what zimp's build, tests and benchmarks need on a fresh Debian machine.
# Each component lists its packages in scripts/deps.d/<component>.apt (Debian) and
# <component>.pip (PyPI), one name per line. Quiet when everything is present.
# Extra lists given as arguments (e.g. eval/zerofree/deps.apt) are installed too:
# what only an evaluation needs stays out of the build and test command.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
extra_apt=() extra_pip=()
for f in "$@"; do
  case $f in *.apt) extra_apt+=("$f") ;; *.pip) extra_pip+=("$f") ;; esac
done

apt_want=()
while read -r pkg; do
  [ -n "$pkg" ] || continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || apt_want+=("$pkg")
done < <(cat "$here"/deps.d/*.apt "${extra_apt[@]}" 2>/dev/null | sed 's/#.*//' | tr -s ' \t' '\n' | sort -u)

if [ ${#apt_want[@]} -gt 0 ]; then
  echo "deps: installing ${apt_want[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${apt_want[@]}" >/dev/null
fi

pip_want=$(cat "$here"/deps.d/*.pip "${extra_pip[@]}" 2>/dev/null | sed 's/#.*//' | tr -s ' \t' '\n' | sort -u | tr '\n' ' ')
if [ -n "${pip_want// /}" ]; then
  missing=""
  for p in $pip_want; do python3 -m pip show -q "${p%%[<>=]*}" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    echo "deps: pip installing$missing"
    python3 -m pip install -q $missing
  fi
fi
