"""Deprecated import path, kept for one release: use :mod:`seqlab.data.annotations`.
A module-level setting is read where it lives now: set it there, not here."""

from seqlab.data.annotations import ANNOTATION_SUFFIXES, CharSpan, FORMATS, JSON_FLAVOURS, OUTPUTS, RecordWriter, align_spans, char_spans, convert, flavour_of, format_of, is_annotation_file, iter_annotations, iter_json_records, parse_record, predict_annotations, read_annotations, records_to_sentences, render_record, text_records, to_doc, write_docbin

__all__ = ["ANNOTATION_SUFFIXES", "CharSpan", "FORMATS", "JSON_FLAVOURS", "OUTPUTS", "RecordWriter", "align_spans", "char_spans", "convert", "flavour_of", "format_of", "is_annotation_file", "iter_annotations", "iter_json_records", "parse_record", "predict_annotations", "read_annotations", "records_to_sentences", "render_record", "text_records", "to_doc", "write_docbin"]
