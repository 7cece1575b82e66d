"""Tools for working on kfsim itself: the import graph of the tree and its picture."""
