# Sourced by .ci/run: start_postgres sets PG_URL; stop_postgres stops that cluster.
start_postgres() {
    local bindir port
    bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    PG_DATA="$(mktemp -d /tmp/journal-bridge-pg.XXXXXX)"
    chown postgres "$PG_DATA"
    su postgres -s /bin/sh -c "$bindir/initdb -D $PG_DATA -U postgres -A trust" >/dev/null
    su postgres -s /bin/sh -c "$bindir/pg_ctl -D $PG_DATA -o '-p $port -k $PG_DATA -c listen_addresses=127.0.0.1 -c max_connections=200' -l $PG_DATA/log -w start" >/dev/null
    PG_BIN="$bindir"
    PG_URL="postgresql://postgres@127.0.0.1:$port/postgres"
    echo "postgres running at $PG_URL"
}

stop_postgres() {
    if [ -n "${PG_DATA:-}" ]; then
        su postgres -s /bin/sh -c "$PG_BIN/pg_ctl -D $PG_DATA -m fast stop" >/dev/null 2>&1 || true
        rm -rf "$PG_DATA" 2>/dev/null || true
    fi
}
