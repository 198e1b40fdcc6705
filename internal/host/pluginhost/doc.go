// Package pluginhost runs WebAssembly plugins inside the product: it keeps the
// loaded versions in step with the store (so every gateway process sharing a
// database converges on the same versions), loads plugins from a watched
// directory and from the binary's built-in set, installs and rolls back
// versions for operators, and adapts ledger plugins to the platform's
// ledger interface.
//
// Ledger names resolve dynamically: the manifest's `ledger: account` finds
// whatever version of the plugin "account" is current at the moment of each
// call, so a hot swap needs no restart, and an entity type whose plugin is
// not loaded yet answers 503 for facts and commands until it is.
package pluginhost
