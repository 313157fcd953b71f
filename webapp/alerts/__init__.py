"""Email alerts to subscribers, threaded under the patch's mail thread."""
