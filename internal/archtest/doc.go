// Package archtest holds no code: its test checks that the packages of
// depsd import only what ARCHITECTURE.md ("What each package may import")
// allows, so the layering cannot erode one convenient import at a time.
package archtest
