"""families package."""
