"""The presentation layer: the rows every view (CLI, TUI, widget, dot) shows, computed once from the
reader API. Import submodules directly (``from thundervis.present import source_view``)."""
