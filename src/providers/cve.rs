//! CVE ids as vulnerability databases embed them in their own ids.

/// The CVE id embedded in a vulnerability id, if any: `CVE-2024-3094` itself,
/// or the tail of `UBUNTU-CVE-2024-3094` (Ubuntu and some other databases
/// prefix the CVE id with their own name).
pub fn embedded_cve(id: &str) -> Option<&str> {
    let start = id.find("CVE-")?;
    if start > 0 && !id[..start].ends_with('-') {
        return None;
    }
    let cve = &id[start..];
    is_cve_id(cve).then_some(cve)
}

/// `CVE-YYYY-NNNN…`: four year digits, at least four sequence digits.
pub fn is_cve_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("CVE-") else {
        return false;
    };
    let Some((year, seq)) = rest.split_once('-') else {
        return false;
    };
    year.len() == 4
        && seq.len() >= 4
        && year.bytes().all(|b| b.is_ascii_digit())
        && seq.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cve_ids_are_found_inside_prefixed_ids() {
        assert_eq!(embedded_cve("CVE-2024-3094"), Some("CVE-2024-3094"));
        assert_eq!(embedded_cve("UBUNTU-CVE-2024-6387"), Some("CVE-2024-6387"));
        assert_eq!(embedded_cve("GHSA-34jh-p97f-mpxf"), None);
        assert_eq!(embedded_cve("XCVE-2024-1234"), None);
        assert_eq!(embedded_cve("CVE-2024-12"), None);
        assert_eq!(embedded_cve("USN-6859-1"), None);
    }
}
