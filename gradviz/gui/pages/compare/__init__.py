"""Side-by-side comparison of two distance-fit runs on the same data."""
