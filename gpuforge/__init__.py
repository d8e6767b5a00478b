"""gpuforge: the command line and the offline engine around the Pulumi program."""

__version__ = "0.1.0"
