//! CycloneDX XML, 1.2 to 1.7: the version is the namespace's
//! (`http://cyclonedx.org/schema/bom/1.4`); components are read wherever
//! they nest under `bom/components`, the subject from `metadata`, and a
//! component of a pedigree or elsewhere is not one of the BOM's packages.
//! Read as a stream: no DTD, no external entity, and only the fields of the
//! component being read are kept.

use super::json::trivy_source;
use super::{DocumentError, Entry, MAX_DEPTH, cyclonedx_version};
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

const NAMESPACE: &str = "http://cyclonedx.org/schema/bom/";
/// XML elements nest about four levels per component level.
const MAX_ELEMENT_DEPTH: usize = MAX_DEPTH * 4;

/// What the element being read holds for the component it belongs to.
enum Capture {
    Purl,
    Name,
    Property(String),
}

/// A component being read: its place in `entries` and the depth of its
/// element.
struct Open {
    index: usize,
    depth: usize,
    properties: Vec<(String, String)>,
}

pub(super) fn read(body: &[u8]) -> Result<(String, Vec<Entry>), DocumentError> {
    let text =
        std::str::from_utf8(body).map_err(|_| DocumentError::NotXml("not UTF-8".to_owned()))?;
    let mut reader = Reader::from_str(text);
    let mut path: Vec<String> = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut version = None;
    let mut capture: Option<(Capture, String)> = None;
    loop {
        let event = reader.read_event().map_err(|e| {
            DocumentError::NotXml(assetscan_domain::text::truncate_chars(&e.to_string(), 160))
        })?;
        let empty = matches!(event, Event::Empty(_));
        match event {
            Event::Start(element) | Event::Empty(element) => {
                let name = local(&element);
                if path.is_empty() && version.is_none() {
                    version = Some(bom_version(&element)?);
                } else if path.len() >= MAX_ELEMENT_DEPTH {
                    return Err(DocumentError::TooDeep);
                } else {
                    let found = (&mut open, &mut entries, &mut capture);
                    start(&name, &element, &path, found);
                }
                if empty {
                    end(&name, path.len(), &mut open, &mut entries, &mut capture);
                } else {
                    path.push(name);
                }
            }
            Event::End(_) => {
                let Some(name) = path.pop() else {
                    return Err(DocumentError::NotXml("an end without a start".to_owned()));
                };
                end(&name, path.len(), &mut open, &mut entries, &mut capture);
            }
            Event::Text(text) => append(&mut capture, &text.xml_content(XmlVersion::Implicit1_0)),
            Event::CData(data) => append(&mut capture, &data.xml_content(XmlVersion::Implicit1_0)),
            Event::GeneralRef(reference) => {
                if let Some((_, value)) = capture.as_mut() {
                    value.push(resolve(&reference)?);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !path.is_empty() {
        return Err(DocumentError::NotXml("cut short".to_owned()));
    }
    let version = version.ok_or(DocumentError::UnknownFormat)?;
    Ok((format!("CycloneDX {version} XML"), entries))
}

/// Text of the element being captured, if one is.
fn append(capture: &mut Option<(Capture, String)>, text: &str) {
    if let Some((_, value)) = capture.as_mut() {
        value.push_str(text);
    }
}

/// The CycloneDX version of the root element, which must be `bom` in
/// CycloneDX's namespace.
fn bom_version(root: &BytesStart<'_>) -> Result<String, DocumentError> {
    if local(root) != "bom" {
        return Err(DocumentError::UnknownFormat);
    }
    let namespace = root
        .attributes()
        .flatten()
        .filter(|a| {
            let key = a.key.as_ref();
            key == "xmlns" || key.starts_with("xmlns:")
        })
        .filter_map(|a| a.normalized_value(XmlVersion::Implicit1_0).ok())
        .find(|value| value.starts_with(NAMESPACE))
        .ok_or(DocumentError::UnknownFormat)?;
    let version = namespace[NAMESPACE.len()..].to_owned();
    cyclonedx_version(&version)?;
    Ok(version)
}

fn local(element: &BytesStart<'_>) -> String {
    element.local_name().as_ref().to_owned()
}

/// What the reader has found so far: the components open, the entries,
/// and the text being captured.
type Found<'a> = (
    &'a mut Vec<Open>,
    &'a mut Vec<Entry>,
    &'a mut Option<(Capture, String)>,
);

/// A component of the BOM is a `component` in `bom/components`, or in a
/// component's `components`, however deep; the subject is
/// `bom/metadata/component`.
fn start(
    name: &str,
    element: &BytesStart<'_>,
    path: &[String],
    (open, entries, capture): Found<'_>,
) {
    let depth = path.len();
    let in_component = open.last().filter(|o| o.depth + 1 == depth);
    match name {
        "component" if is_component_list(path) || path == ["bom", "metadata"] => {
            entries.push(Entry {
                subject: path.len() == 2 && path[1] == "metadata",
                ..Entry::default()
            });
            open.push(Open {
                index: entries.len() - 1,
                depth,
                properties: Vec::new(),
            });
        }
        "purl" if in_component.is_some() => *capture = Some((Capture::Purl, String::new())),
        "name" if in_component.is_some() => *capture = Some((Capture::Name, String::new())),
        "property"
            if open.last().is_some_and(|o| o.depth + 2 == depth)
                && path.last().is_some_and(|p| p == "properties") =>
        {
            let key = element
                .try_get_attribute("name")
                .ok()
                .flatten()
                .and_then(|a| a.normalized_value(XmlVersion::Implicit1_0).ok())
                .map(|v| v.into_owned())
                .unwrap_or_default();
            *capture = Some((Capture::Property(key), String::new()));
        }
        _ => {}
    }
}

/// `bom/components`, then `component/components` pairs.
fn is_component_list(path: &[String]) -> bool {
    let Some(("bom", rest)) = path.split_first().map(|(f, r)| (f.as_str(), r)) else {
        return false;
    };
    rest.len() % 2 == 1
        && rest.iter().enumerate().all(|(i, segment)| {
            segment
                == if i % 2 == 0 {
                    "components"
                } else {
                    "component"
                }
        })
}

fn end(
    name: &str,
    depth: usize,
    open: &mut Vec<Open>,
    entries: &mut [Entry],
    capture: &mut Option<(Capture, String)>,
) {
    if let Some((what, value)) = capture.take() {
        let value = value.trim().to_owned();
        if let Some(current) = open.last_mut() {
            let entry = &mut entries[current.index];
            match what {
                Capture::Purl => entry.purl = Some(value).filter(|v| !v.is_empty()),
                Capture::Name => entry.name = value,
                Capture::Property(key) => current.properties.push((key, value)),
            }
        }
    }
    if name == "component"
        && open.last().is_some_and(|o| o.depth == depth)
        && let Some(done) = open.pop()
    {
        let property = |key: &str| {
            (done.properties.iter())
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        entries[done.index].source = trivy_source(property);
    }
}

/// `&amp;` and the other predefined entities, and character references;
/// no other entity is defined in a CycloneDX document.
fn resolve(reference: &quick_xml::events::BytesRef<'_>) -> Result<char, DocumentError> {
    let unknown = || DocumentError::NotXml("an undefined entity".to_owned());
    if let Ok(Some(c)) = reference.resolve_char_ref() {
        return Ok(c);
    }
    match reference.xml_content(XmlVersion::Implicit1_0).as_ref() {
        "amp" => Ok('&'),
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "apos" => Ok('\''),
        "quot" => Ok('"'),
        _ => Err(unknown()),
    }
}
