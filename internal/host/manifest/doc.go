// Package manifest loads and checks Factline's YAML manifests into
// validated, immutable models.
//
// Every problem found carries the file, line and column of the YAML node
// that caused it, so `factline check` reads like a compiler: all problems at
// once, each pointing at its line.
package manifest
