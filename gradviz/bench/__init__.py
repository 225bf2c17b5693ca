"""Speed measurements behind `gradviz bench`: one module per suite, each with run()."""
