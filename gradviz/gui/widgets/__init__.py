"""Live views of the distance-fit lab: pyqtgraph widgets that show Snapshots."""
