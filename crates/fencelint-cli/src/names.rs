//! Kernel names as findings show them: C++ names demangled, for every input.

use std::collections::HashMap;

use fencelint_diagnostics::Diagnostic;

/// Names each diagnostic's kernel readably: an Itanium C++ name ([`demangle`]) becomes the
/// demangled one, in the `kernel` field and in the message, which may quote it. Done once for
/// every input (listings, PTX and binaries alike) after `fencelint.toml`'s `[[ignore]]` entries
/// have seen the name as written; fingerprints were made from that name and do not change.
pub(crate) fn demangle_kernels(diagnostics: &mut [Diagnostic]) {
    // Each name once: a large listing has thousands of findings in hundreds of kernels.
    let mut readable: HashMap<String, Option<String>> = HashMap::new();
    for diagnostic in diagnostics {
        let Some(kernel) = &diagnostic.kernel else { continue };
        let name = readable.entry(kernel.clone()).or_insert_with(|| readable_kernel(kernel));
        if let Some(name) = name {
            diagnostic.message = diagnostic.message.replace(kernel.as_str(), name);
            diagnostic.kernel = Some(name.clone());
        }
    }
}

/// The demangled name of `kernel` when it is a mangled C++ name (`_Z…`), else `None`.
pub(crate) fn readable_kernel(kernel: &str) -> Option<String> {
    if kernel.starts_with("_Z") { demangle(kernel) } else { None }
}

/// Demangles an Itanium C++ name (`_Z…`), or `None` if it is not one. A `$N` suffix (the copy
/// of a function that a separately compiled cubin holds under a name of its own,
/// `_Z21wait_relaxed_and_readPKjPKf$1`) stays after the demangled name.
pub(crate) fn demangle(name: &str) -> Option<String> {
    let demangle = |name: &str| cpp_demangle::Symbol::new(name.as_bytes()).ok()?.demangle().ok();
    demangle(name).or_else(|| {
        let (base, copy) = name.rsplit_once('$')?;
        let digits = !copy.is_empty() && copy.bytes().all(|b| b.is_ascii_digit());
        digits.then(|| demangle(base)).flatten().map(|readable| format!("{readable}${copy}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_demangle_with_their_copy_number() {
        let name = "wait_relaxed_and_read(unsigned int const*, float const*)";
        assert_eq!(demangle("_Z21wait_relaxed_and_readPKjPKf").as_deref(), Some(name));
        assert_eq!(
            demangle("_Z21wait_relaxed_and_readPKjPKf$1").as_deref(),
            Some(format!("{name}$1").as_str())
        );
        assert_eq!(demangle("_Z21wait_relaxed_and_readPKjPKf$"), None);
        assert_eq!(demangle("_Z21wait_relaxed_and_readPKjPKf$x1"), None);
        assert_eq!(demangle("kernel$1"), None);
    }

    #[test]
    fn only_mangled_kernels_are_renamed_in_the_field_and_the_message() {
        use fencelint_diagnostics::{Label, Severity, codes};
        use fencelint_source::{FileId, TextRange};
        let note = |kernel: &str| {
            let label = Label::new(FileId(0), TextRange::empty(0), "here");
            let message = format!("the calls of `{kernel}` were not followed");
            Diagnostic::new(codes::ANALYSIS_INCOMPLETE, Severity::Warning, message, label)
                .with_kernel(kernel)
        };
        let mut diagnostics = [note("_Z4waitPKj"), note("consumer"), note("_Zbogus")];
        demangle_kernels(&mut diagnostics);
        let kernels: Vec<_> = diagnostics.iter().map(|d| d.kernel.as_deref().unwrap()).collect();
        assert_eq!(kernels, ["wait(unsigned int const*)", "consumer", "_Zbogus"]);
        assert_eq!(
            diagnostics[0].message,
            "the calls of `wait(unsigned int const*)` were not followed"
        );
    }
}
