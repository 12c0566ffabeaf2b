"""The presentation layer: the rows and rules every view (CLI, TUI, widget, dot) shows, read through
the reader API. Import submodules directly (``from thundervis.present import roofline``)."""
