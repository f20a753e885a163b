"""Stream parts to records: the capture setting, the two mappers and the per-run reader."""
