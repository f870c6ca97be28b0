/*
 * A 5x8 bitmap font (font5x8.c) for the tools' pictures. Not installed.
 */
#ifndef SHARD_TOOLS_FONT5X8_H
#define SHARD_TOOLS_FONT5X8_H

#define FONT5X8_WIDTH 5
#define FONT5X8_HEIGHT 8

/* Character c's 8 rows (bit 4 the leftmost pixel); '?' for one outside ASCII 32..126. */
const unsigned char *font5x8_glyph(int c);

#endif /* SHARD_TOOLS_FONT5X8_H */
