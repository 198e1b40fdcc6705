// Package plugins holds Factline's own plugins, one main package per
// directory (account, asset, generic, followup), built to WebAssembly by
// `make plugins`. This package itself only exposes the built modules to the
// binary: built with the tag embedplugins (as `make build` does), the
// factline binary carries them and loads them when the store has none.
package plugins
