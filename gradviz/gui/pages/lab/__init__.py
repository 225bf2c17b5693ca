"""The distance-fit lab: the run session, its worker, and the views it feeds."""
