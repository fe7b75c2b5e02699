"""Build, verify and test PyTorch/CUDA container images from a validated matrix."""

__version__ = "0.1.0"
