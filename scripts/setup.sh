#!/usr/bin/env bash
# Installs everything `npm start` and `npm test` need on a fresh Debian (12 or newer) or Ubuntu
# machine, then the npm packages:
#   - Node.js 20.19 or newer: Debian's own package when it is new enough (Debian 13); on an
#     older system it says so and stops (Debian 12 ships Node.js 18: install a current Node first);
#   - Redis (`redis-server`, with `redis-cli`): the test suite's storage, event-bus and
#     multi-instance tests, its Sentinel and Cluster tests (private servers it starts);
#   - `openssl`: the TLS tests make their certificates with it;
#   - Debian's Chromium (`/usr/bin/chromium`): the console's browser tests;
#   - the project's npm packages (`npm ci`).
# Whatever is already installed is left as it is, so running it again does nothing new.
# Uses apt-get, as root or through sudo. `.ci/run` runs it on every clean clone.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: run as root, or install sudo" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
  echo "setup.sh: apt-get install $*"
  $SUDO apt-get install -y -qq "$@" >/dev/null
}
node_ok() {
  command -v node >/dev/null &&
    node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'
}

# Node.js 20.19+ (and npm).
if ! node_ok; then
  $SUDO apt-get update -qq
  apt_updated=1
  candidate=$(apt-cache policy nodejs | sed -n 's/^ *Candidate: *//p')
  if [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && dpkg --compare-versions "$candidate" ge 20.19; then
    apt_install nodejs
  else
    echo "setup.sh: this system's nodejs package is older than 20.19: install Node.js 20.19 or newer (22 or 24 recommended), then run this again" >&2
    exit 1
  fi
  command -v npm >/dev/null || apt_install npm
  node_ok || { echo "setup.sh: Node.js $(node --version 2>/dev/null) is older than 20.19" >&2; exit 1; }
fi
echo "setup.sh: Node.js $(node --version), npm $(npm --version)"

# Redis for the test suite: installed unless one already answers on 127.0.0.1:6379 (the suite
# uses that one, or starts a private redis-server when none answers).
redis_answers() { (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; }
if command -v redis-server >/dev/null; then
  echo "setup.sh: $(redis-server --version | cut -d' ' -f1-3)"
elif redis_answers; then
  echo "setup.sh: a Redis answers on 127.0.0.1:6379"
else
  apt_install redis-server
fi

# The Sentinel and Cluster tests start redis-servers of their own and join a cluster with redis-cli.
command -v redis-cli >/dev/null || apt_install redis-tools
command -v redis-server >/dev/null || apt_install redis-server
# The TLS tests make certificates with openssl.
command -v openssl >/dev/null || apt_install openssl

# Debian's Chromium for the console's browser tests (test/facade/console).
[ -x /usr/bin/chromium ] || apt_install chromium
echo "setup.sh: $(/usr/bin/chromium --version 2>/dev/null || echo 'chromium installed')"

npm ci --no-audit --no-fund
