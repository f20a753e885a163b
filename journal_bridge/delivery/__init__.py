"""Records to the store: the bridge, the delivery queue, the spool and the health verdict."""
