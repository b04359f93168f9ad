#!/usr/bin/env bash
# Vendors the console's third-party browser libraries (and the accessibility checker the
# browser tests inject) from the npm registry. Each package is pinned in scripts/vendor-js.txt
# by version and by the registry's SHA-512 integrity of its tarball; a tarball that does not
# match is refused. The files land in the repository, so building or running Gale needs
# neither Node nor the network.
#
# To update a package: change its version in vendor-js.txt, put in the integrity that
# `npm view <name>@<version> dist.integrity` prints, run this script, read the diff and the
# package's changelog, and run the browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

grep -v '^\s*#' scripts/vendor-js.txt | while read -r name version integrity dest files; do
	[ -n "$name" ] || continue
	base=${name##*/}
	url="https://registry.npmjs.org/$name/-/$base-$version.tgz"
	curl -fsSL "$url" -o "$tmp/pkg.tgz"
	got="sha512-$(openssl dgst -sha512 -binary "$tmp/pkg.tgz" | base64 -w0)"
	if [ "$got" != "$integrity" ]; then
		echo "$name@$version: the tarball's integrity is $got, not the pinned $integrity: refused" >&2
		exit 1
	fi
	rm -rf "$tmp/package"
	tar -xzf "$tmp/pkg.tgz" -C "$tmp"
	mkdir -p "$dest"
	IFS=, read -ra list <<<"$files"
	for f in "${list[@]}"; do
		cp "$tmp/package/$f" "$dest/$(basename "$f")"
	done
	cp "$tmp/package/LICENSE" "$dest/LICENSE.$base"
	echo "$name@$version -> $dest"
done
