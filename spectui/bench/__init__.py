"""`spectui bench`: speculative decoding measured against its anchors, per workload."""
