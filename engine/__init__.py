"""Reference paged-attention engine: the bit-exact target of the C++ patches in patches/.

Importing the package is cheap and needs no torch: the block manager is pure Python,
so `python -m engine vectors` runs on a machine that only has the standard library.
"""
