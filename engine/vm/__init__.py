"""VM runner engine (libvirt). Does not import Django."""
