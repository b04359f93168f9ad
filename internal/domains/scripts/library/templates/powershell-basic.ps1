# Stops at the first error; parameters arrive as environment variables ($env:NAME).
$ErrorActionPreference = 'Stop'
try {
    Write-Output "Running on $env:COMPUTERNAME"
    # Your work here.
    exit 0
} catch {
    Write-Error $_
    exit 1
}
