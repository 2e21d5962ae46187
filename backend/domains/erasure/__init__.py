"""The erasure guard (MEM-19): writes for a person hold her lock; an erasure takes it exclusively."""
