#!/usr/bin/env bash
# scripts/newer-servers.sh: Redis 8.x and Valkey 9.x on Debian bookworm for CI and for running the suites on them
# (.ci/run calls it when redis8-server or valkey9-server is missing; CONTRIBUTING.md "The CI budget" says what runs
# where). Prebuilt packages of Debian's own newer suites: no compiling, and nothing downloaded from anywhere but the
# Debian archive the machine's bookworm sources already name.
#
# What it does, all in a private prefix (default /opt/newer-redis) and never in the system's apt/dpkg state (its
# apt lists, cache and locks are private, so it runs beside the system's own apt-get update/install):
#   1. a private apt configuration (its own sources, lists, cache; no pins, no hooks) naming the suites
#      trixie, forky, sid and experimental of the SAME archive the machine's bookworm sources use;
#   2. picks the newest redis-tools 8.x and valkey-tools 9.x those suites serve (override: REDIS8_VERSION,
#      VALKEY9_VERSION = an exact Debian version, e.g. 5:8.6.3-1 / 9.1.2-1), and fails loudly when that is
#      below REDIS8_MIN / VALKEY9_MIN (below);
#   3. `apt-get download`s those packages plus their runtime libraries (glibc, libstdc++, libssl, libsystemd,
#      jemalloc, lzf, ...) from trixie (else forky, else sid: the first whose glibc the binary accepts) and
#      unpacks them with `dpkg -x`;
#   4. writes wrappers that start each binary with the prefix's own dynamic loader and libraries:
#        /usr/local/bin/redis8-server  redis8-cli  redis8-benchmark
#        /usr/local/bin/valkey9-server valkey9-cli valkey9-benchmark
#      They take exactly the flags of redis-server / redis-cli (cluster mode included). The PID of a wrapper
#      is the server's own (exec); /proc/PID/comm reads "ld-linux-x86-64" (ps/pgrep by name won't find it).
#      And PATH directories whose plain names point at them, for tools that call `redis-server`/`redis-cli`:
#        $PREFIX/path-redis8/{redis-server,redis-cli,redis-benchmark}
#        $PREFIX/path-valkey9/{valkey-server,valkey-cli,valkey-benchmark,redis-server,redis-cli,redis-benchmark}
#   5. checks each server: starts it on a Unix socket only (--port 0: no TCP port taken), PING, and its reported
#      version against the minimum, stop.
#
# Idempotent: with everything in place (and at least the minimum versions) a run only re-checks (about a second).
# Options / environment:
#   --refresh                 update the private package lists and move to newer versions if any
#   --redis-only | --valkey-only
#   NEWER_SERVERS_PREFIX      (default /opt/newer-redis)
#   NEWER_SERVERS_BINDIR      (default /usr/local/bin)
#   NEWER_SERVERS_APT_URI     the Debian archive URI (default: the one the machine's bookworm sources name)
#   REDIS8_MIN                (default 8.6) the lowest Redis this project's Redis 8 runs rely on: XREADGROUP ... CLAIM
#                             (8.4), XACKDEL (8.2) and XADD ... IDMP (8.6). experimental's packages come and go, and
#                             trixie's floor is only 8.0.2: the run fails rather than test an older server.
#   VALKEY9_MIN               (default 9.0)
# Needs root (or write access to PREFIX and BINDIR), apt-get, dpkg, and the archive reachable. amd64 only.
set -euo pipefail
export LC_ALL=C

PREFIX=${NEWER_SERVERS_PREFIX:-/opt/newer-redis}
REDIS8_MIN=${REDIS8_MIN:-8.6}
VALKEY9_MIN=${VALKEY9_MIN:-9.0}
BINDIR=${NEWER_SERVERS_BINDIR:-/usr/local/bin}
REFRESH=0 WANT_REDIS=1 WANT_VALKEY=1
for a in "$@"; do
  case $a in
    --refresh) REFRESH=1 ;;
    --redis-only) WANT_VALKEY=0 ;;
    --valkey-only) WANT_REDIS=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "newer-servers: unknown option $a" >&2; exit 2 ;;
  esac
done

say() { echo "newer-servers: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
T0=$SECONDS

[ "$(dpkg --print-architecture)" = amd64 ] || die "only amd64 is handled (the loader path below is x86-64's)"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || die "needs apt-get and dpkg (Debian)"
mkdir -p "$PREFIX" "$BINDIR"

# One run at a time (two CI lanes, or a developer and CI, may call it at once).
exec 9>"$PREFIX/.lock"
flock 9

APTDIR=$PREFIX/apt
# The private apt configuration, its lists (~65 MB) and the downloads are only needed during an install: they go
# on any exit (written anew by the next install; no file naming the archive stays behind).
trap 'rm -rf "$APTDIR" "$PREFIX/debs" "$PREFIX/.installed.tmp"' EXIT

APTCONF=$APTDIR/apt.conf
LIBSUITES=(trixie forky sid)
# Runtime libraries of redis-tools / valkey-tools (their Depends, plus what those libraries load themselves:
# libssl3t64 -> zlib1g, libzstd1; libsystemd0 -> libcap2). The check in step 3 fails loudly if one is missing.
LIBPKGS=(libc6 libgcc-s1 libstdc++6 libatomic1 libjemalloc2 liblzf1 libssl3t64 zlib1g libzstd1 libsystemd0 libcap2)

# ------------------------------------------------------------------ 1. private apt configuration
archive_uri() {
  if [ -n "${NEWER_SERVERS_APT_URI:-}" ]; then echo "$NEWER_SERVERS_APT_URI"; return; fi
  local f uri=
  # deb822 (bookworm's default): the URIs of a stanza whose Suites name plain "bookworm".
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk 'BEGIN{RS="";FS="\n"} {u="";s=""; for(i=1;i<=NF;i++){ if($i~/^URIs:/){split($i,a,/[ \t]+/);u=a[2]} if($i~/^Suites:/) s=" "$i" " } if(u!="" && s~/[ \t]bookworm[ \t]/){print u; exit} }' "$f")
    [ -n "$uri" ] && break
  done
  # One-line format.
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1=="deb" && $3=="bookworm" {for(i=2;i<=NF;i++) if($i !~ /^\[/ && $i !~ /\]$/){print $i; exit}}' /etc/apt/sources.list)
  fi
  [ -n "$uri" ] || die "found no bookworm archive URI in /etc/apt/sources.list(.d); set NEWER_SERVERS_APT_URI"
  echo "$uri"
}

write_apt_config() {
  local uri; uri=$(archive_uri)
  mkdir -p "$APTDIR/sources.list.d" "$APTDIR/preferences.d" "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
  : >"$APTDIR/sources.list"
  cat >"$APTDIR/sources.list.d/newer.sources.tmp" <<EOF
Types: deb
URIs: $uri
Suites: trixie forky sid experimental
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  mv "$APTDIR/sources.list.d/newer.sources.tmp" "$APTDIR/sources.list.d/newer.sources"
  # Only what `apt-get update/download` and `apt-cache` read. No #clear of the machine's own transport settings
  # (proxies etc. stay in force); its hooks and pins are left out so nothing runs or changes outside PREFIX.
  cat >"$APTCONF.tmp" <<EOF
Dir::Etc::sourcelist "$APTDIR/sources.list";
Dir::Etc::sourceparts "$APTDIR/sources.list.d";
Dir::Etc::preferences "$APTDIR/preferences";
Dir::Etc::preferencesparts "$APTDIR/preferences.d";
Dir::State::Lists "$APTDIR/lists";
Dir::Cache "$APTDIR/cache";
Dir::Cache::archives "$APTDIR/cache/archives";
APT::Sandbox::User "root";
Acquire::Languages "none";
Acquire::PDiffs "false";
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled "false";
Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear DPkg::Pre-Invoke;
#clear DPkg::Post-Invoke;
EOF
  mv "$APTCONF.tmp" "$APTCONF"
}

aptget() { apt-get -c "$APTCONF" -q "$@"; }
aptcache() { apt-cache -c "$APTCONF" "$@"; }

update_lists() {
  say "updating the private package lists (trixie forky sid experimental)"
  local t=$SECONDS
  aptget update >"$APTDIR/update.log" 2>&1 || { cat "$APTDIR/update.log" >&2; die "apt-get update (private lists) failed"; }
  say "lists updated in $((SECONDS - t)) s"
}

# newest_version PACKAGE REGEX -> the highest version of PACKAGE in the private lists matching REGEX (e.g. ^5:8\.)
newest_version() {
  local best= v
  while read -r v; do
    [[ $v =~ $2 ]] || continue
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
  done < <(aptcache madison "$1" 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}')
  echo "$best"
}
# suite_of PACKAGE VERSION -> the suites serving exactly that version, comma-separated (e.g. forky,sid)
suite_of() { aptcache madison "$1" 2>/dev/null | awk -F'|' -v v="$2" '{gsub(/ /,"",$2)} $2==v {split($3,a," "); split(a[2],b,"/"); s=s (s==""?"":",") b[1]} END{print s}'; }

# ------------------------------------------------------------------ 2./3. packages, libraries
LOADER_REL=usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
LIBDIR_REL=usr/lib/x86_64-linux-gnu

# runtime SUITE -> unpacks the runtime libraries of SUITE into $PREFIX/runtime/SUITE (once)
runtime() {
  local suite=$1 dir=$PREFIX/runtime/$1
  if [ -f "$dir/.complete" ]; then return 0; fi
  say "runtime libraries from $suite: ${LIBPKGS[*]}"
  local dl=$PREFIX/debs/runtime-$suite
  rm -rf "$dl" "$dir.tmp"
  mkdir -p "$dl" "$dir.tmp"
  (cd "$dl" && aptget download "${LIBPKGS[@]/%//$suite}" >"$dl/download.log" 2>&1) || { cat "$dl/download.log" >&2; return 1; }
  local deb
  for deb in "$dl"/*.deb; do dpkg -x "$deb" "$dir.tmp"; done
  (cd "$dl" && ls *.deb) >"$dir.tmp/.packages"
  rm -rf "$dl"
  touch "$dir.tmp/.complete"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
}

# check_binary RUNTIME_DIR BINARY -> 0 when BINARY starts with that runtime and loads no library from outside it
check_binary() {
  local rt=$1 bin=$2 out
  out=$("$rt/$LOADER_REL" --inhibit-cache --library-path "$rt/$LIBDIR_REL" --list "$bin" 2>&1) || { say "  $(echo "$out" | head -2)"; return 1; }
  if echo "$out" | grep -q 'not found'; then say "  missing: $(echo "$out" | grep 'not found' | tr -s ' \t\n' ' ')"; return 1; fi
  local outside
  outside=$(echo "$out" | awk '/=>/ {print $3}' | grep -v "^$rt/" || true)
  if [ -n "$outside" ]; then say "  libraries from outside the runtime: $outside"; return 1; fi
  "$rt/$LOADER_REL" --inhibit-cache --library-path "$rt/$LIBDIR_REL" "$bin" --version >/dev/null 2>&1
}

# install_server NAME PKG-PREFIX VERSION-REGEX WANTED-VERSION WRAPPER-STEM PLAIN-STEM
#   e.g. install_server Redis redis '^5:8\.' "$REDIS8_VERSION" redis8 redis
install_server() {
  local name=$1 pkg=$2 re=$3 want=$4 stem=$5 plain=$6
  local ver; ver=${want:-$(newest_version "$pkg-tools" "$re")}
  [ -n "$ver" ] || die "no $pkg-tools matching $re in trixie/forky/sid/experimental"
  local suite; suite=$(suite_of "$pkg-tools" "$ver")
  local upstream=${ver#*:}; upstream=${upstream%%[-+~]*}
  local min_var=${stem^^}_MIN; local min=${!min_var:-}
  if [ -n "$min" ] && dpkg --compare-versions "$upstream" lt "$min"; then
    die "$name $upstream is the newest the archive serves now; $min_var=$min asks for more"
  fi
  local t=$SECONDS
  local dir=$PREFIX/$pkg-${ver#*:}
  if [ ! -f "$dir/.complete" ]; then
    say "$name $upstream: $pkg-tools and $pkg-server $ver (from ${suite:-?})"
    local dl=$PREFIX/debs/$pkg-${ver#*:}
    rm -rf "$dl" "$dir.tmp"
    mkdir -p "$dl" "$dir.tmp"
    (cd "$dl" && aptget download "$pkg-tools=$ver" "$pkg-server=$ver" >"$dl/download.log" 2>&1) || { cat "$dl/download.log" >&2; die "download of $pkg $ver failed"; }
    local deb
    for deb in "$dl"/*.deb; do dpkg -x "$deb" "$dir.tmp"; done
    rm -rf "$dl"
    # Only the programs are used (the package's /etc, systemd units, man pages are not): drop what is not them.
    rm -rf "$dir.tmp/etc" "$dir.tmp/usr/lib/systemd" "$dir.tmp/usr/lib/tmpfiles.d" "$dir.tmp/usr/share/man"
    [ -x "$dir.tmp/usr/bin/$pkg-server" ] || die "$pkg $ver has no usr/bin/$pkg-server"
    echo "$ver ${suite:-?}" >"$dir.tmp/.version"
    touch "$dir.tmp/.complete"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  fi
  # The runtime: the first of trixie, forky, sid whose libraries the server and the CLI load (glibc version etc.).
  local rt= s
  for s in "${LIBSUITES[@]}"; do
    if runtime "$s" && check_binary "$PREFIX/runtime/$s" "$dir/usr/bin/$pkg-server" && check_binary "$PREFIX/runtime/$s" "$dir/usr/bin/$pkg-cli"; then
      rt=$PREFIX/runtime/$s
      break
    fi
    say "  $name $upstream does not run on $s's libraries, trying the next suite"
  done
  [ -n "$rt" ] || die "$name $ver runs on none of ${LIBSUITES[*]}'s libraries"

  # Wrappers: written to a temp file and moved, so a running test never sees half a file.
  local tool w
  for tool in server cli benchmark; do
    [ -e "$dir/usr/bin/$pkg-$tool" ] || continue
    w=$BINDIR/$stem-$tool
    cat >"$w.tmp.$$" <<EOF
#!/bin/sh
# $stem-$tool: $name $upstream ($pkg-tools $ver, Debian ${suite:-?}) with the runtime libraries of Debian ${rt##*/}.
# Written by newer-servers.sh; same flags as $pkg-$tool.
exec "$rt/$LOADER_REL" --inhibit-cache --library-path "$rt/$LIBDIR_REL" "$dir/usr/bin/$pkg-$tool" "\$@"
EOF
    chmod 755 "$w.tmp.$$"
    mv -f "$w.tmp.$$" "$w"
  done
  local pathdir=$PREFIX/path-$stem
  mkdir -p "$pathdir"
  for tool in server cli benchmark; do
    [ -e "$BINDIR/$stem-$tool" ] || continue
    ln -sfn "$BINDIR/$stem-$tool" "$pathdir/$pkg-$tool"
    ln -sfn "$BINDIR/$stem-$tool" "$pathdir/$plain-$tool"
  done
  echo "$name $upstream|$ver|${suite:-?}|${rt##*/}|$dir" >>"$PREFIX/.installed.tmp"
  say "$name $upstream ready in $((SECONDS - t)) s"
}

# ------------------------------------------------------------------ 5. check: start, PING, stop (Unix socket only)
smoke() {
  local stem=$1 tmp pid v
  tmp=$(mktemp -d)
  "$BINDIR/$stem-server" --port 0 --unixsocket "$tmp/s.sock" --save '' --appendonly no --dir "$tmp" --daemonize no \
    --logfile "$tmp/log" &
  pid=$!
  for _ in $(seq 1 100); do
    [ -S "$tmp/s.sock" ] && "$BINDIR/$stem-cli" -s "$tmp/s.sock" PING 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
  v=$("$BINDIR/$stem-cli" -s "$tmp/s.sock" INFO server 2>/dev/null | tr -d '\r' | awk -F: '$1=="valkey_version"{vk=$2} $1=="redis_version"{rv=$2} END{print (vk!=""?"valkey "vk:"redis "rv)}')
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -z "$v" ] || [ "$v" = "redis " ]; then say "$stem-server did not answer; its log:"; cat "$tmp/log" >&2; rm -rf "$tmp"; return 1; fi
  rm -rf "$tmp"
  echo "$v"
}

# ------------------------------------------------------------------ main
installed_ok() { # fast path: everything from a previous run in place
  [ "$REFRESH" = 0 ] && [ -f "$PREFIX/.installed" ] || return 1
  [ "$WANT_REDIS" = 0 ] || [ -x "$BINDIR/redis8-server" ] || return 1
  [ "$WANT_VALKEY" = 0 ] || [ -x "$BINDIR/valkey9-server" ] || return 1
  [ "$WANT_REDIS" = 0 ] || grep -q '^Redis ' "$PREFIX/.installed" || return 1
  [ "$WANT_VALKEY" = 0 ] || grep -q '^Valkey ' "$PREFIX/.installed" || return 1
  local have
  have=$(sed -n 's/^Redis \([^|]*\)|.*/\1/p' "$PREFIX/.installed")
  [ -z "${REDIS8_MIN:-}" ] || [ -z "$have" ] || dpkg --compare-versions "$have" ge "$REDIS8_MIN" || return 1
  have=$(sed -n 's/^Valkey \([^|]*\)|.*/\1/p' "$PREFIX/.installed")
  [ -z "${VALKEY9_MIN:-}" ] || [ -z "$have" ] || dpkg --compare-versions "$have" ge "$VALKEY9_MIN" || return 1
}

if installed_ok; then
  say "already installed (--refresh to look for newer versions)"
else
  write_apt_config
  update_lists
  rm -f "$PREFIX/.installed.tmp"
  # A server not asked for this time (--redis-only / --valkey-only) keeps what it had.
  if [ -f "$PREFIX/.installed" ]; then
    [ "$WANT_REDIS" = 1 ] || grep '^Redis ' "$PREFIX/.installed" >>"$PREFIX/.installed.tmp" || true
    [ "$WANT_VALKEY" = 1 ] || grep '^Valkey ' "$PREFIX/.installed" >>"$PREFIX/.installed.tmp" || true
  fi
  touch "$PREFIX/.installed.tmp"
  [ "$WANT_REDIS" = 0 ] || install_server Redis redis '^5:8\.' "${REDIS8_VERSION:-}" redis8 redis
  [ "$WANT_VALKEY" = 0 ] || install_server Valkey valkey '^9\.' "${VALKEY9_VERSION:-}" valkey9 redis
  mv "$PREFIX/.installed.tmp" "$PREFIX/.installed"
  # Versions or runtimes no wrapper uses any more (after --refresh) go.
  for d in "$PREFIX"/redis-* "$PREFIX"/valkey-* "$PREFIX"/runtime/*; do
    [ -d "$d" ] || continue
    grep -qF "|$d" "$PREFIX/.installed" && continue
    case $d in "$PREFIX"/runtime/*) grep -q "|${d##*/}|" "$PREFIX/.installed" && continue ;; esac
    say "removing unused $d"
    rm -rf "$d"
  done
fi

rm -rf "$APTDIR" "$PREFIX/debs"
rc=0
for stem in redis8 valkey9; do
  [ -x "$BINDIR/$stem-server" ] || continue
  case $stem in redis8) [ "$WANT_REDIS" = 1 ] || continue ;; valkey9) [ "$WANT_VALKEY" = 1 ] || continue ;; esac
  if ! v=$(smoke "$stem"); then rc=1; continue; fi
  # What the wrapper really starts, against the minimum (a wrapper left from an older install, or a package
  # whose Debian version says more than the binary).
  min_var=${stem^^}_MIN
  if ! dpkg --compare-versions "${v#* }" ge "${!min_var}"; then
    say "ERROR: $stem-server answers as $v; $min_var=${!min_var} asks for more"
    rc=1
    continue
  fi
  say "$stem-server ok: $v (PATH dir for plain names: $PREFIX/path-$stem)"
done
sed 's/^/newer-servers: installed: /; s/|/  package /; s/|/ from /; s/|/, libraries from /; s/|/, in /' "$PREFIX/.installed" >&2
say "done in $((SECONDS - T0)) s; $(du -sh "$PREFIX" | cut -f1) in $PREFIX"
exit $rc
