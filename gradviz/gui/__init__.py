"""The desktop app (Qt). Shows Snapshots and sends commands; never runs autograd itself."""
