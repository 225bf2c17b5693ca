"""The distance-fit run on the Qt side, shared by the pages that show it: the run session
and its worker, the run's status and actions, the lab's views, a recorded run played back
and a recording followed while it grows."""
