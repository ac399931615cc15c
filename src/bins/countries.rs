//! ISO 3166-1 countries: alpha-2, alpha-3, numeric code and short name.
//! Facts from the ISO 3166-1 list (249 entries, generated into Rust
//! source), sorted by alpha-2 for binary search. Used to fill the
//! `issuing_country_*` fields of a BIN record from a range file's
//! alpha-2 country.

/// One country of ISO 3166-1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Country {
    pub alpha2: &'static str,
    pub alpha3: &'static str,
    /// Three digits, leading zeros kept.
    pub numeric: &'static str,
    pub name: &'static str,
}

const fn c(alpha2: &'static str, alpha3: &'static str, numeric: &'static str, name: &'static str) -> Country {
    Country {
        alpha2,
        alpha3,
        numeric,
        name,
    }
}

/// Finds a country by alpha-2, alpha-3 or numeric code (letters in any case).
pub fn find(code: &str) -> Option<&'static Country> {
    let code = code.trim();
    let upper = code.to_ascii_uppercase();
    match code.len() {
        2 => COUNTRIES
            .binary_search_by(|c| c.alpha2.cmp(upper.as_str()))
            .ok()
            .map(|i| &COUNTRIES[i]),
        3 if code.bytes().all(|b| b.is_ascii_digit()) => COUNTRIES.iter().find(|c| c.numeric == code),
        3 => COUNTRIES.iter().find(|c| c.alpha3 == upper),
        _ => None,
    }
}

#[rustfmt::skip]
pub static COUNTRIES: &[Country] = &[
    c("AD", "AND", "020", "Andorra"),
    c("AE", "ARE", "784", "United Arab Emirates"),
    c("AF", "AFG", "004", "Afghanistan"),
    c("AG", "ATG", "028", "Antigua and Barbuda"),
    c("AI", "AIA", "660", "Anguilla"),
    c("AL", "ALB", "008", "Albania"),
    c("AM", "ARM", "051", "Armenia"),
    c("AO", "AGO", "024", "Angola"),
    c("AQ", "ATA", "010", "Antarctica"),
    c("AR", "ARG", "032", "Argentina"),
    c("AS", "ASM", "016", "American Samoa"),
    c("AT", "AUT", "040", "Austria"),
    c("AU", "AUS", "036", "Australia"),
    c("AW", "ABW", "533", "Aruba"),
    c("AX", "ALA", "248", "Åland Islands"),
    c("AZ", "AZE", "031", "Azerbaijan"),
    c("BA", "BIH", "070", "Bosnia and Herzegovina"),
    c("BB", "BRB", "052", "Barbados"),
    c("BD", "BGD", "050", "Bangladesh"),
    c("BE", "BEL", "056", "Belgium"),
    c("BF", "BFA", "854", "Burkina Faso"),
    c("BG", "BGR", "100", "Bulgaria"),
    c("BH", "BHR", "048", "Bahrain"),
    c("BI", "BDI", "108", "Burundi"),
    c("BJ", "BEN", "204", "Benin"),
    c("BL", "BLM", "652", "Saint Barthélemy"),
    c("BM", "BMU", "060", "Bermuda"),
    c("BN", "BRN", "096", "Brunei Darussalam"),
    c("BO", "BOL", "068", "Bolivia, Plurinational State of"),
    c("BQ", "BES", "535", "Bonaire, Sint Eustatius and Saba"),
    c("BR", "BRA", "076", "Brazil"),
    c("BS", "BHS", "044", "Bahamas"),
    c("BT", "BTN", "064", "Bhutan"),
    c("BV", "BVT", "074", "Bouvet Island"),
    c("BW", "BWA", "072", "Botswana"),
    c("BY", "BLR", "112", "Belarus"),
    c("BZ", "BLZ", "084", "Belize"),
    c("CA", "CAN", "124", "Canada"),
    c("CC", "CCK", "166", "Cocos (Keeling) Islands"),
    c("CD", "COD", "180", "Congo, The Democratic Republic of the"),
    c("CF", "CAF", "140", "Central African Republic"),
    c("CG", "COG", "178", "Congo"),
    c("CH", "CHE", "756", "Switzerland"),
    c("CI", "CIV", "384", "Côte d'Ivoire"),
    c("CK", "COK", "184", "Cook Islands"),
    c("CL", "CHL", "152", "Chile"),
    c("CM", "CMR", "120", "Cameroon"),
    c("CN", "CHN", "156", "China"),
    c("CO", "COL", "170", "Colombia"),
    c("CR", "CRI", "188", "Costa Rica"),
    c("CU", "CUB", "192", "Cuba"),
    c("CV", "CPV", "132", "Cabo Verde"),
    c("CW", "CUW", "531", "Curaçao"),
    c("CX", "CXR", "162", "Christmas Island"),
    c("CY", "CYP", "196", "Cyprus"),
    c("CZ", "CZE", "203", "Czechia"),
    c("DE", "DEU", "276", "Germany"),
    c("DJ", "DJI", "262", "Djibouti"),
    c("DK", "DNK", "208", "Denmark"),
    c("DM", "DMA", "212", "Dominica"),
    c("DO", "DOM", "214", "Dominican Republic"),
    c("DZ", "DZA", "012", "Algeria"),
    c("EC", "ECU", "218", "Ecuador"),
    c("EE", "EST", "233", "Estonia"),
    c("EG", "EGY", "818", "Egypt"),
    c("EH", "ESH", "732", "Western Sahara"),
    c("ER", "ERI", "232", "Eritrea"),
    c("ES", "ESP", "724", "Spain"),
    c("ET", "ETH", "231", "Ethiopia"),
    c("FI", "FIN", "246", "Finland"),
    c("FJ", "FJI", "242", "Fiji"),
    c("FK", "FLK", "238", "Falkland Islands (Malvinas)"),
    c("FM", "FSM", "583", "Micronesia, Federated States of"),
    c("FO", "FRO", "234", "Faroe Islands"),
    c("FR", "FRA", "250", "France"),
    c("GA", "GAB", "266", "Gabon"),
    c("GB", "GBR", "826", "United Kingdom"),
    c("GD", "GRD", "308", "Grenada"),
    c("GE", "GEO", "268", "Georgia"),
    c("GF", "GUF", "254", "French Guiana"),
    c("GG", "GGY", "831", "Guernsey"),
    c("GH", "GHA", "288", "Ghana"),
    c("GI", "GIB", "292", "Gibraltar"),
    c("GL", "GRL", "304", "Greenland"),
    c("GM", "GMB", "270", "Gambia"),
    c("GN", "GIN", "324", "Guinea"),
    c("GP", "GLP", "312", "Guadeloupe"),
    c("GQ", "GNQ", "226", "Equatorial Guinea"),
    c("GR", "GRC", "300", "Greece"),
    c("GS", "SGS", "239", "South Georgia and the South Sandwich Islands"),
    c("GT", "GTM", "320", "Guatemala"),
    c("GU", "GUM", "316", "Guam"),
    c("GW", "GNB", "624", "Guinea-Bissau"),
    c("GY", "GUY", "328", "Guyana"),
    c("HK", "HKG", "344", "Hong Kong"),
    c("HM", "HMD", "334", "Heard Island and McDonald Islands"),
    c("HN", "HND", "340", "Honduras"),
    c("HR", "HRV", "191", "Croatia"),
    c("HT", "HTI", "332", "Haiti"),
    c("HU", "HUN", "348", "Hungary"),
    c("ID", "IDN", "360", "Indonesia"),
    c("IE", "IRL", "372", "Ireland"),
    c("IL", "ISR", "376", "Israel"),
    c("IM", "IMN", "833", "Isle of Man"),
    c("IN", "IND", "356", "India"),
    c("IO", "IOT", "086", "British Indian Ocean Territory"),
    c("IQ", "IRQ", "368", "Iraq"),
    c("IR", "IRN", "364", "Iran, Islamic Republic of"),
    c("IS", "ISL", "352", "Iceland"),
    c("IT", "ITA", "380", "Italy"),
    c("JE", "JEY", "832", "Jersey"),
    c("JM", "JAM", "388", "Jamaica"),
    c("JO", "JOR", "400", "Jordan"),
    c("JP", "JPN", "392", "Japan"),
    c("KE", "KEN", "404", "Kenya"),
    c("KG", "KGZ", "417", "Kyrgyzstan"),
    c("KH", "KHM", "116", "Cambodia"),
    c("KI", "KIR", "296", "Kiribati"),
    c("KM", "COM", "174", "Comoros"),
    c("KN", "KNA", "659", "Saint Kitts and Nevis"),
    c("KP", "PRK", "408", "Korea, Democratic People's Republic of"),
    c("KR", "KOR", "410", "Korea, Republic of"),
    c("KW", "KWT", "414", "Kuwait"),
    c("KY", "CYM", "136", "Cayman Islands"),
    c("KZ", "KAZ", "398", "Kazakhstan"),
    c("LA", "LAO", "418", "Lao People's Democratic Republic"),
    c("LB", "LBN", "422", "Lebanon"),
    c("LC", "LCA", "662", "Saint Lucia"),
    c("LI", "LIE", "438", "Liechtenstein"),
    c("LK", "LKA", "144", "Sri Lanka"),
    c("LR", "LBR", "430", "Liberia"),
    c("LS", "LSO", "426", "Lesotho"),
    c("LT", "LTU", "440", "Lithuania"),
    c("LU", "LUX", "442", "Luxembourg"),
    c("LV", "LVA", "428", "Latvia"),
    c("LY", "LBY", "434", "Libya"),
    c("MA", "MAR", "504", "Morocco"),
    c("MC", "MCO", "492", "Monaco"),
    c("MD", "MDA", "498", "Moldova, Republic of"),
    c("ME", "MNE", "499", "Montenegro"),
    c("MF", "MAF", "663", "Saint Martin (French part)"),
    c("MG", "MDG", "450", "Madagascar"),
    c("MH", "MHL", "584", "Marshall Islands"),
    c("MK", "MKD", "807", "North Macedonia"),
    c("ML", "MLI", "466", "Mali"),
    c("MM", "MMR", "104", "Myanmar"),
    c("MN", "MNG", "496", "Mongolia"),
    c("MO", "MAC", "446", "Macao"),
    c("MP", "MNP", "580", "Northern Mariana Islands"),
    c("MQ", "MTQ", "474", "Martinique"),
    c("MR", "MRT", "478", "Mauritania"),
    c("MS", "MSR", "500", "Montserrat"),
    c("MT", "MLT", "470", "Malta"),
    c("MU", "MUS", "480", "Mauritius"),
    c("MV", "MDV", "462", "Maldives"),
    c("MW", "MWI", "454", "Malawi"),
    c("MX", "MEX", "484", "Mexico"),
    c("MY", "MYS", "458", "Malaysia"),
    c("MZ", "MOZ", "508", "Mozambique"),
    c("NA", "NAM", "516", "Namibia"),
    c("NC", "NCL", "540", "New Caledonia"),
    c("NE", "NER", "562", "Niger"),
    c("NF", "NFK", "574", "Norfolk Island"),
    c("NG", "NGA", "566", "Nigeria"),
    c("NI", "NIC", "558", "Nicaragua"),
    c("NL", "NLD", "528", "Netherlands"),
    c("NO", "NOR", "578", "Norway"),
    c("NP", "NPL", "524", "Nepal"),
    c("NR", "NRU", "520", "Nauru"),
    c("NU", "NIU", "570", "Niue"),
    c("NZ", "NZL", "554", "New Zealand"),
    c("OM", "OMN", "512", "Oman"),
    c("PA", "PAN", "591", "Panama"),
    c("PE", "PER", "604", "Peru"),
    c("PF", "PYF", "258", "French Polynesia"),
    c("PG", "PNG", "598", "Papua New Guinea"),
    c("PH", "PHL", "608", "Philippines"),
    c("PK", "PAK", "586", "Pakistan"),
    c("PL", "POL", "616", "Poland"),
    c("PM", "SPM", "666", "Saint Pierre and Miquelon"),
    c("PN", "PCN", "612", "Pitcairn"),
    c("PR", "PRI", "630", "Puerto Rico"),
    c("PS", "PSE", "275", "Palestine, State of"),
    c("PT", "PRT", "620", "Portugal"),
    c("PW", "PLW", "585", "Palau"),
    c("PY", "PRY", "600", "Paraguay"),
    c("QA", "QAT", "634", "Qatar"),
    c("RE", "REU", "638", "Réunion"),
    c("RO", "ROU", "642", "Romania"),
    c("RS", "SRB", "688", "Serbia"),
    c("RU", "RUS", "643", "Russian Federation"),
    c("RW", "RWA", "646", "Rwanda"),
    c("SA", "SAU", "682", "Saudi Arabia"),
    c("SB", "SLB", "090", "Solomon Islands"),
    c("SC", "SYC", "690", "Seychelles"),
    c("SD", "SDN", "729", "Sudan"),
    c("SE", "SWE", "752", "Sweden"),
    c("SG", "SGP", "702", "Singapore"),
    c("SH", "SHN", "654", "Saint Helena, Ascension and Tristan da Cunha"),
    c("SI", "SVN", "705", "Slovenia"),
    c("SJ", "SJM", "744", "Svalbard and Jan Mayen"),
    c("SK", "SVK", "703", "Slovakia"),
    c("SL", "SLE", "694", "Sierra Leone"),
    c("SM", "SMR", "674", "San Marino"),
    c("SN", "SEN", "686", "Senegal"),
    c("SO", "SOM", "706", "Somalia"),
    c("SR", "SUR", "740", "Suriname"),
    c("SS", "SSD", "728", "South Sudan"),
    c("ST", "STP", "678", "Sao Tome and Principe"),
    c("SV", "SLV", "222", "El Salvador"),
    c("SX", "SXM", "534", "Sint Maarten (Dutch part)"),
    c("SY", "SYR", "760", "Syrian Arab Republic"),
    c("SZ", "SWZ", "748", "Eswatini"),
    c("TC", "TCA", "796", "Turks and Caicos Islands"),
    c("TD", "TCD", "148", "Chad"),
    c("TF", "ATF", "260", "French Southern Territories"),
    c("TG", "TGO", "768", "Togo"),
    c("TH", "THA", "764", "Thailand"),
    c("TJ", "TJK", "762", "Tajikistan"),
    c("TK", "TKL", "772", "Tokelau"),
    c("TL", "TLS", "626", "Timor-Leste"),
    c("TM", "TKM", "795", "Turkmenistan"),
    c("TN", "TUN", "788", "Tunisia"),
    c("TO", "TON", "776", "Tonga"),
    c("TR", "TUR", "792", "Türkiye"),
    c("TT", "TTO", "780", "Trinidad and Tobago"),
    c("TV", "TUV", "798", "Tuvalu"),
    c("TW", "TWN", "158", "Taiwan, Province of China"),
    c("TZ", "TZA", "834", "Tanzania, United Republic of"),
    c("UA", "UKR", "804", "Ukraine"),
    c("UG", "UGA", "800", "Uganda"),
    c("UM", "UMI", "581", "United States Minor Outlying Islands"),
    c("US", "USA", "840", "United States"),
    c("UY", "URY", "858", "Uruguay"),
    c("UZ", "UZB", "860", "Uzbekistan"),
    c("VA", "VAT", "336", "Holy See (Vatican City State)"),
    c("VC", "VCT", "670", "Saint Vincent and the Grenadines"),
    c("VE", "VEN", "862", "Venezuela, Bolivarian Republic of"),
    c("VG", "VGB", "092", "Virgin Islands, British"),
    c("VI", "VIR", "850", "Virgin Islands, U.S."),
    c("VN", "VNM", "704", "Viet Nam"),
    c("VU", "VUT", "548", "Vanuatu"),
    c("WF", "WLF", "876", "Wallis and Futuna"),
    c("WS", "WSM", "882", "Samoa"),
    c("YE", "YEM", "887", "Yemen"),
    c("YT", "MYT", "175", "Mayotte"),
    c("ZA", "ZAF", "710", "South Africa"),
    c("ZM", "ZMB", "894", "Zambia"),
    c("ZW", "ZWE", "716", "Zimbabwe"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        assert_eq!(COUNTRIES.len(), 249);
        for w in COUNTRIES.windows(2) {
            assert!(
                w[0].alpha2 < w[1].alpha2,
                "{} before {}",
                w[0].alpha2,
                w[1].alpha2
            );
        }
        let mut a3: Vec<_> = COUNTRIES.iter().map(|c| c.alpha3).collect();
        a3.sort();
        a3.dedup();
        assert_eq!(a3.len(), COUNTRIES.len());
        for c in COUNTRIES {
            assert!(c.alpha2.len() == 2 && c.alpha3.len() == 3 && c.numeric.len() == 3);
            assert!(c.numeric.bytes().all(|b| b.is_ascii_digit()));
        }
    }

    #[test]
    fn lookups() {
        let us = find("US").unwrap();
        assert_eq!((us.alpha3, us.numeric, us.name), ("USA", "840", "United States"));
        assert_eq!(find("us"), Some(us));
        assert_eq!(find("USA"), Some(us));
        assert_eq!(find("840"), Some(us));
        assert_eq!(find("DK").unwrap().alpha3, "DNK");
        assert_eq!(find("AD").unwrap().numeric, "020");
        assert_eq!(find("GB").unwrap().alpha3, "GBR");
        assert_eq!(find("XX"), None);
        assert_eq!(find(""), None);
        assert_eq!(find("U"), None);
    }
}
