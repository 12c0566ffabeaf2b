"""The presentation layer: the rows and rules every view (CLI, TUI, widget) shows, computed from
the reader API. Import submodules directly (``from thundervis.present import asm``)."""
