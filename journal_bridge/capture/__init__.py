"""Where runs are seen: request middleware, protocol v2, follower, reconciler, backfill."""
