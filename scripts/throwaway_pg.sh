# Sourced by the benchmark scripts that need PostgreSQL: a throw-away
# PostgreSQL 15 cluster in a temp dir ($WORK/pg), made with initdb, with
# fsync, synchronous_commit and full_page_writes on, on a Unix socket only.
#
#   pg_find_bin            sets PGBIN (KOBO_PG_BIN, or where initdb is)
#   pg_start MAX_CONNS     initdb and start (needs WORK and PGBIN)
#   pg_stop                stop at once (safe when not started)
#   pg_url DB              the connection URL of database DB
#
# PostgreSQL refuses to run as root: the cluster then runs as nobody.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
pg_find_bin() {
  PGBIN=${KOBO_PG_BIN:-$(dirname "$(readlink -f "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")}
}
pg_start() {
  mkdir "$WORK/pg"
  chown nobody "$WORK/pg" 2>/dev/null || true
  as_pg "$PGBIN/initdb" -D "$WORK/pg/data" -A trust -U kobo >/dev/null
  as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/log" -w \
    -o "-c fsync=on -c synchronous_commit=on -c full_page_writes=on -c listen_addresses='' -c unix_socket_directories=$WORK/pg -c max_connections=$1" \
    start >/dev/null
}
pg_stop() {
  if [ -f "$WORK/pg/data/postmaster.pid" ]; then
    as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m immediate stop >/dev/null 2>&1 || true
  fi
}
pg_url() { echo "postgresql:///$1?host=$WORK/pg&user=kobo"; }
