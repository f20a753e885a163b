# Sourced by .ci/run: start_redis sets REDIS_URL; stop_redis stops that server.
start_redis() {
    local port
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    REDIS_DIR="$(mktemp -d /tmp/journal-bridge-redis.XXXXXX)"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$REDIS_DIR" --save '' --appendonly no \
        --daemonize yes --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/log" >/dev/null
    for _ in $(seq 50); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    REDIS_URL="redis://127.0.0.1:$port/0"
    echo "redis running at $REDIS_URL"
}

stop_redis() {
    if [ -n "${REDIS_DIR:-}" ]; then
        if [ -f "$REDIS_DIR/redis.pid" ]; then
            local pid
            pid="$(cat "$REDIS_DIR/redis.pid")"
            kill "$pid" 2>/dev/null || true
            # Its files go only once it has exited; cleanup never fails the run.
            for _ in $(seq 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
        fi
        rm -rf "$REDIS_DIR" 2>/dev/null || true
    fi
}
