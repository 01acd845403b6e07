#!/usr/bin/env bash
# Installs what a fresh machine lacks (Debian -dev libraries, pinned Python
# packages) and builds meshsim into the current Python environment.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in g++ libxtensor-dev libxsimd-dev libtbb-dev libopenblas-dev ccache pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  apt_net=(-o Acquire::Retries=5 -o Acquire::http::Timeout=60)  # mirrors fail now and then
  apt-get "${apt_net[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive apt-get "${apt_net[@]}" install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
pip_net=(--retries 10 --timeout 60)
"$PY" -m pip install -q --disable-pip-version-check "${pip_net[@]}" \
  "scikit-build-core==1.1.2" "pybind11==3.1.0" "numpy==2.4.6" "cmake==4.4.5" "ninja==1.13.2"
bash scripts/fetch-pocketfft  # the FFT's header-only library, from a pinned NumPy sdist
"$PY" -m pip install -q --disable-pip-version-check "${pip_net[@]}" --no-build-isolation ".[test]"
