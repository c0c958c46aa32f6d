// Package oracle is approval's argument parser, canonical writer and
// display copy as they were at main 83cc2d6, before the parse kept
// offsets into the document and the string writers worked in runs
// (branch args27). It is frozen: the differential tests and fuzz targets
// in package approval compare every output (hash, display copy,
// warnings, canonical form, errors) with it. Do not change it to make a
// test pass; change it only with the contract it pins down.
package oracle
