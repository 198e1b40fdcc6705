// Package storable says which values Factline can store: text without
// NUL and in valid UTF-8, JSON documents with no member twice and numbers
// in range, numbers written out as they are kept. The host's stores and
// the gateway refuse what it refuses, and the plugin conformance kit
// holds a plugin's decisions to the same rules, so they live here, beside
// neither.
package storable
