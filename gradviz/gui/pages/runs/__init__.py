"""The Runs page: logged scalars of several runs, recorded or live, overlaid on one plot."""
