"""The command lines (``jaxrl <command>``, ``python -m jaxrl.<command>``): each parses its
flags and calls the layers below; none is imported by another layer.
"""
