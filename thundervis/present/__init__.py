"""The presentation layer: the rules every view (CLI, TUI, widget) shows through. Import the
submodules directly (``from thundervis.present import kernel_runs``)."""
