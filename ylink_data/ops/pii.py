"""pii: replace personal data in the text with typed placeholders; never drops a document."""
from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ylink_data.text.transform.pii import PII_TYPES, PiiRedactor, PiiType
from ylink_data.ops import register
from ylink_data.ops.base import Document, DocumentMapper


@register
class Pii(DocumentMapper):
    """Redact e-mail addresses, IP addresses (IPv4, IPv6), phone numbers (international `+CC ...`,
    North-American, mainland-China mobile), mainland-China resident ID numbers (GB 11643-1999
    checksum and birth date checked) and payment card numbers (Luhn, issuer prefix and length
    checked). `types` chooses the kinds; each kind's placeholder is a parameter. Counters:
    `pii_<type>` per kind (how many values were replaced) and `pii_documents` (documents changed).

    Precision first: dates, times, prices, years, version strings, ISBNs and digits inside longer
    digit runs are left alone; see `ylink_data.text.transform.pii` for the exact shapes.
    """

    name = "pii"

    def __init__(self, types: Annotated[tuple[PiiType, ...], Field(min_length=1)] = PII_TYPES,
                 email_placeholder: str = "<EMAIL>",
                 ip_placeholder: str = "<IP>", phone_placeholder: str = "<PHONE>", cn_id_placeholder: str = "<CN_ID>",
                 card_placeholder: str = "<CARD>"):
        self.redactor = PiiRedactor(types, {"email": email_placeholder, "ip": ip_placeholder,
                                            "phone": phone_placeholder, "cn_id": cn_id_placeholder,
                                            "card": card_placeholder})

    def map(self, doc: Document) -> Document:
        text, counts = self.redactor.redact(doc.text)
        if counts:
            for kind, n in counts.items():
                self.count(f"pii_{kind}", n)
            self.count("pii_documents")
            doc.text = text
        return doc

