"""Scientific images: chunked sources (OME-Zarr, OME-TIFF, tiled TIFF; local or over HTTP)
read tile by tile, shown from their raw values (integer and float channels kept exact on
the GPU) with contrast limits, gamma, colormaps and additive channel composites.

source (the ChunkedSource protocol, ArraySource), pyramid (levels made on the fly),
readers (OME-Zarr and TIFF, paths and URLs), reads (concurrent, cancellable tile reads),
plan (pure: level, tiles, slots), display and colormaps (the look of a channel, pure),
gpu (the value cache, LUTs and the draw) and view (ScienceView). docs/science.md is the
user's guide.
"""
