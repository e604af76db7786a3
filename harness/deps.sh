#!/usr/bin/env bash
# Installs the Debian packages tact needs to build and test; does nothing when all are present.
set -eu
pkgs=(build-essential cmake pkg-config clang libzmq3-dev libmsgpack-dev libcriterion-dev
      ocl-icd-opencl-dev opencl-headers pocl-opencl-icd zlib1g-dev libzstd-dev libopenblas-dev
      dataset-fashion-mnist python3-dev python3-numpy python3-setuptools)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "tact: installing missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
