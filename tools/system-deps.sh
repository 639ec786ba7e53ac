#!/bin/sh
# Install the Debian packages PyVista needs to render headless through EGL (Mesa's software
# renderer), only when they are missing. Needs root (or passwordless sudo) only in that case.
set -e
missing=""
for pkg in libegl1 libgl1-mesa-dri; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
echo "installing Debian packages:$missing"
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
